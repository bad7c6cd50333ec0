# Bindings of csrc/search (filled in as that part of the core lands).
