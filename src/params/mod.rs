//! params (in progress)
