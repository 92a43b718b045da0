//! compat (in progress)
