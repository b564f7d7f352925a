// SwiftPM needs one source file to build a C target; everything is in the header.
#include "CLinuxShims.h"
