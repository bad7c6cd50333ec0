# Bindings of csrc/exec (filled in as that part of the core lands).
