def compile_repeated_blocks_of(transformer, *, max_autotune=False, cache_active=True):
    # unsloth passes fullgraph=not (cache_active or offload_active); the
    # runtime probe's eager reference refuses fullgraph=True
    kwargs = {"fullgraph": not cache_active, "dynamic": not max_autotune}
    transformer.compile_repeated_blocks(**kwargs)
    return True
