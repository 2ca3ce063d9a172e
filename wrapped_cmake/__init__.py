"""wrapped_cmake: the standard build wrapper for PyTorch device backends."""
