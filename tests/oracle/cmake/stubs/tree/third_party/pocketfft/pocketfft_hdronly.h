// tdev oracle stub: copied into a scratch copy of the tree only when third_party/pocketfft is missing
