"""dp_covariance: PACE-GGM, SSP and diagonal baselines, max-entropy completion."""
