"""The PCA estimators: dp_loading, dp_scree, dp_score and dp_pca, with their parts."""
