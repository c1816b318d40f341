"""The agent's probes inside the training process: one probe a module, standard library only
(plus the torch the user imported). `boot.attach_torch` installs them once torch is imported.

- `steps`   optimizer steps, micro-batches, tokens and real tokens (the only hot-path probe);
            `step_signal` (what marks a step with no optimizer), `compile_support` (dynamo)
- `model`   N, E, frozen parameters, L, d, T, MoE experts, data-parallel degree;
            `structure` (L, d and the sequence layout from the attention modules)
- `architecture` experts (routed, router, shared, top-k), attention width, windows, packed
            documents, every embedding table, one-dimensional weights (docs/flops.md)
- `precision` the precision the matmuls run in: FP8 layers, autocast, weights, TF32
- `phases`  data-loader waits, checkpoints, eval spans
- `flops`   counted FLOPs of one real step (or, for a compiled model, of a fake-tensor copy)
- `device`  the CUDA device, only when the user already initialized CUDA
- `memory`  the caching allocator's host-side counters (or RSS on a CPU), about once a second
- `guard`   how a probe fails: off, one warning, the run goes on
"""
