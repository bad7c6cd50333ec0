# Bindings of csrc/tdl (filled in as that part of the core lands).
