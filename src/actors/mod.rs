//! actors (in progress)
