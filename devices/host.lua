-- This machine: runners run in place, rusage from wait4. Data only (schema: docs/devices.md).
return {
  name = "host",
  description = "This machine (runners run in place)",
  transport = "host",
  flow = "executorch",
}
