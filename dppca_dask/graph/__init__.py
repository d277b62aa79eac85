"""All Dask code: the single compute point, the Kendall tiling and reductions, row-block
passes, the pass log and the stage protocols."""
