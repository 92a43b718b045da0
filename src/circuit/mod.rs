//! circuit (in progress)
