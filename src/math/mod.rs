//! math (in progress)
