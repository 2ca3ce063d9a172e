// tdev oracle stub: version macros read by FindCUDSS
#define CUDSS_VER_MAJOR 0
#define CUDSS_VER_MINOR 4
#define CUDSS_VER_PATCH 0
