"""The decode engine: paged KV cache, scheduler, model runner, sampler (see DESIGN.md "Engine")."""
