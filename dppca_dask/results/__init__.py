"""Result types (xarray-backed, written to Zarr/NetCDF) and load_result."""
