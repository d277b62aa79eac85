"""Inputs: adapters (as_data), the Zarr chunk guard, dataset identity, convert, demo data."""
