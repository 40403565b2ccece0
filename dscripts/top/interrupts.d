/*
 * interrupts.d: interrupt and DPC routines by count, and how long the ISRs take to start.
 * Needs: ISR and DPC events (isr, dpc) of the kernel logger.
 * Arguments as the Windows port's: arg0 the start time, arg1 the routine, arg3 the ISR's vector.
 * Example: dtx -E trace.etl --tui -s dscripts/top/interrupts.d
 */
#pragma D option quiet

isr:::isr
{
	@isr[sym(arg1), arg3] = count();
}

dpc:::dpc,
dpc:::timer,
dpc:::thread
{
	@dpc[probename, sym(arg1)] = count();
}
