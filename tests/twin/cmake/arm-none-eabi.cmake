# Toolchain file for the twin firmware: Debian's gcc-arm-none-eabi + libnewlib-arm-none-eabi,
# Cortex-M55 without FPU/MVE (the firmware does integer work only, and nofp keeps the multilib simple).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_OBJCOPY arm-none-eabi-objcopy CACHE FILEPATH "objcopy")
# No host executables can run: test the compiler by building a static library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(TWIN_CPU_FLAGS "-mcpu=cortex-m55 -mthumb -mfloat-abi=soft")
set(CMAKE_C_FLAGS_INIT "${TWIN_CPU_FLAGS} -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${TWIN_CPU_FLAGS}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${TWIN_CPU_FLAGS} -nostartfiles --specs=nano.specs --specs=nosys.specs -Wl,--gc-sections")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
