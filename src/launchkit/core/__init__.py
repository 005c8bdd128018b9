"""The I/O-free core: launch request -> cluster profile -> Beaker spec."""
