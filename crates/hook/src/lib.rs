//! ofi-hook: hooks perf, trace, debug, noop and fault, over any provider.
