// tdev oracle stub: version macros read by FindCUDNN
#define CUDNN_MAJOR 9
#define CUDNN_MINOR 5
#define CUDNN_PATCHLEVEL 0
