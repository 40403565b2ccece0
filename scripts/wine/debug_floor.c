/* The floor of a Win32 debugger loop on this machine: a child runs N int3s; the parent only
   waits for each breakpoint event, reads and writes the thread context and continues (no
   probe lookup, no clause, no step). Prints microseconds per trap.
   debug_floor N */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "child") == 0) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++) __asm__ volatile("int3");
        return 0;
    }
    long n = argc > 1 ? atol(argv[1]) : 10000;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "\"%s\" child %ld", argv[0], n);
    STARTUPINFOA si = {sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessA(0, cmd, 0, 0, FALSE, DEBUG_ONLY_THIS_PROCESS, 0, 0, &si, &pi)) return 1;
    HANDLE thread = 0;
    DWORD main_tid = 0;
    int loader = 1;
    LARGE_INTEGER f, a, b;
    QueryPerformanceFrequency(&f);
    long traps = 0;
    for (;;) {
        DEBUG_EVENT ev;
        if (!WaitForDebugEvent(&ev, INFINITE)) return 2;
        DWORD status = DBG_CONTINUE;
        if (ev.dwDebugEventCode == CREATE_PROCESS_DEBUG_EVENT) {
            thread = ev.u.CreateProcessInfo.hThread;
            main_tid = ev.dwThreadId;
            CloseHandle(ev.u.CreateProcessInfo.hFile);
        } else if (ev.dwDebugEventCode == LOAD_DLL_DEBUG_EVENT) {
            CloseHandle(ev.u.LoadDll.hFile);
        } else if (ev.dwDebugEventCode == EXCEPTION_DEBUG_EVENT) {
            if (ev.u.Exception.ExceptionRecord.ExceptionCode == EXCEPTION_BREAKPOINT) {
                if (loader) {
                    loader = 0;
                    QueryPerformanceCounter(&a);
                } else if (ev.dwThreadId == main_tid) {
                    CONTEXT c;
                    c.ContextFlags = CONTEXT_FULL;
                    GetThreadContext(thread, &c);
                    SetThreadContext(thread, &c);
                    traps++;
                }
            } else {
                status = DBG_EXCEPTION_NOT_HANDLED;
            }
        } else if (ev.dwDebugEventCode == EXIT_PROCESS_DEBUG_EVENT) {
            QueryPerformanceCounter(&b);
            ContinueDebugEvent(ev.dwProcessId, ev.dwThreadId, DBG_CONTINUE);
            break;
        }
        ContinueDebugEvent(ev.dwProcessId, ev.dwThreadId, status);
    }
    double us = (double)(b.QuadPart - a.QuadPart) * 1e6 / (double)f.QuadPart;
    printf("%.2f\n", traps ? us / traps : 0.0);
    return 0;
}
