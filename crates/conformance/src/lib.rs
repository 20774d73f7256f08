//! ofi-conformance (skeleton).
