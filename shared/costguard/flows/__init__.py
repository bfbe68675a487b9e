"""One flow per function: typed event in, the decide-then-act path, a report out."""
