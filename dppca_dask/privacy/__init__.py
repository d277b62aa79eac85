"""Privacy: budgets, zCDP, calibration and spend records, the mechanisms (the only
place noise is drawn), exact samplers, Durfee searches and the empirical audit."""
