/* A DLL the test program loads while it is traced (pidwin dl). */
__declspec(dllexport) int libfunc(int x) { return x * 3; }
