"""Pure detectors: plain data in, findings out. No AWS calls here."""
