-- AWS Graviton4 (Neoverse V2): an r8g/c8g/m8g EC2 instance, reached over SSH. Data only.
return {
  name = "graviton4",
  description = "AWS Graviton4 EC2 instance (aarch64 Linux, Ubuntu 26.04) over SSH",
  kind = "ssh",
  arch = "aarch64",
  binary = "executor_runner-linux-aarch64-graviton",
  remote_dir = "/tmp/odp",
  default_user = "ubuntu",
  os_notes = "Launch the instance with Ubuntu 26.04: the Graviton runner is built and validated on that " ..
    "image; an older image's glibc is too old and the runner will not start (docs/sources.md §8). Use an ed25519 " ..
    "EC2 key pair: libssh2 1.10 cannot use RSA keys with current OpenSSH.",
  glibc_advice = "launch the instance with Ubuntu 26.04 (the image the Graviton runner is built and validated " ..
    "on); an older image's glibc is too old for it",
}
