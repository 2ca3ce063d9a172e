// tdev oracle stub: version macros read by FindCUSPARSELT
#define CUSPARSELT_VER_MAJOR 0
#define CUSPARSELT_VER_MINOR 6
#define CUSPARSELT_VER_PATCH 3
