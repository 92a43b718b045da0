//! synthetic (in progress)
