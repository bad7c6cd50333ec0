"""The benchmarks behind the figures of README.md and docs/benchmarks.md, one module each, so they
run wherever autotile is installed: ``autotile bench NAME [args]`` runs ``python -m
autotile.bench.MODULE [args]`` (one BLAS thread per process). Each prints its tables and writes
a JSON of the raw numbers (and a PNG where it plots) to bench/out/ in a source checkout,
./autotile-bench-out elsewhere, or $AUTOTILE_BENCH_OUT. bench/*.py in a checkout are thin
scripts calling the same modules.
"""

#: ``autotile bench`` name -> (module in autotile.bench, what it measures)
BENCHES = {
    "speedup": ("speedup", "8-device throughput speedup per algorithm, AlexNet/VGG (simulated)"),
    "mlp": ("mlp", "MLP communication and speedup on 1..8 devices (simulated)"),
    "algorithms": ("algorithms", "RNN and WResNet on 8 devices per algorithm (simulated)"),
    "memory": ("memory_fit", "largest batch within a per-device memory budget: tofu, memory-aware search, swapping"),
    "memory-ilp": ("memory_ilp", "memory-aware search against the exact memory-constrained integer program"),
    "search": ("search_time", "planner search time against depth and device count"),
    "validate": ("sim_validate", "simulated step time against measured host runs (calibrates)"),
    "memory-plan": ("memory", "per-device memory plans against the ideal share"),
    "multifetch": ("multifetch", "host MultiFetch bandwidth by region shape against memcpy"),
    "runtime": ("runtime", "host runtime step time on k virtual devices"),
    "mpi": ("mpi", "MPI runtime against the in-process runtime; RMA bandwidth (needs mpirun)"),
    "gpu": ("gpu", "GPU MultiFetch and step times (needs CuPy and a GPU)"),
    "engines": ("engines", "plan bytes against the collectives XLA compiles from the plan (needs jax)"),
    "engines-torch": ("engines_torch", "plans run by PyTorch DTensor on 8 gloo processes: step, collectives (needs torch)"),
}
