// The wrappers are header-only (static inline); SwiftPM needs one source file per C target.
#include "CProtFSSys.h"
