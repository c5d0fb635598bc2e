"""Parameter sweeps: a sweep file expanded into points, run through a command on Dask or
serially, into one resumable HDF5 results table."""
