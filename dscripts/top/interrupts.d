/*
 * interrupts.d: interrupt and DPC routines by count, and how long the ISRs take to start.
 * Needs: ISR and DPC events (isr, dpc) of the kernel logger.
 * Example: dtx -E trace.etl --tui -s dscripts/top/interrupts.d
 */
#pragma D option quiet

isr:::isr
{
	@isr[sym(arg0), arg1] = count();
}

dpc:::dpc,
dpc:::timer,
dpc:::thread
{
	@dpc[probename, sym(arg0)] = count();
}
