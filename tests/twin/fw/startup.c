/* Vector table and reset handler for the twin (Cortex-M55 on QEMU mps3-an547). */
#include <stdint.h>
#include <string.h>

extern uint32_t __stack_top[], __data_start[], __data_end[], __data_load[], __bss_start[], __bss_end[];
extern int main(void);
void Reset_Handler(void);
void SysTick_Handler(void);

static void Fault_Handler(void)
{
	for (;;)
		__asm volatile("wfi");
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16 + 16])(void) = {
	(void (*)(void))__stack_top,
	Reset_Handler,
	Fault_Handler, /* NMI */
	Fault_Handler, /* HardFault */
	Fault_Handler, /* MemManage */
	Fault_Handler, /* BusFault */
	Fault_Handler, /* UsageFault */
	Fault_Handler, /* SecureFault */
	0, 0, 0,
	Fault_Handler, /* SVC */
	Fault_Handler, /* DebugMon */
	0,
	Fault_Handler, /* PendSV */
	SysTick_Handler,
};

void Reset_Handler(void)
{
	memcpy(__data_start, __data_load, (size_t)((char *)__data_end - (char *)__data_start));
	memset(__bss_start, 0, (size_t)((char *)__bss_end - (char *)__bss_start));
	main();
	for (;;)
		__asm volatile("wfi");
}
