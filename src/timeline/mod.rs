//! timeline (in progress)
