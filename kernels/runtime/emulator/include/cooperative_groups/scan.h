// cooperative_groups/scan.h for the CPU emulator: inclusive_scan() is in cooperative_groups.h.
#pragma once
#include "../cooperative_groups.h"
