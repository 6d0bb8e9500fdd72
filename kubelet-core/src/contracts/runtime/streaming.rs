//! Running commands in containers: synchronous exec and the streaming sessions (exec,
//! attach, port forward) a runtime serves from its own streaming server.

/// Output of [`ContainerRuntime::exec_sync`](super::ContainerRuntime::exec_sync).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// Captured stdout.
    pub stdout: Vec<u8>,
    /// Captured stderr.
    pub stderr: Vec<u8>,
    /// Exit code of the command.
    pub exit_code: i32,
}

/// A streaming exec request (the runtime answers with a URL to its streaming server).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecRequest {
    /// Container id.
    pub container_id: String,
    /// Command and args.
    pub cmd: Vec<String>,
    /// Allocate a TTY.
    pub tty: bool,
    /// Stream stdin.
    pub stdin: bool,
    /// Stream stdout.
    pub stdout: bool,
    /// Stream stderr.
    pub stderr: bool,
}

/// A streaming attach request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttachRequest {
    /// Container id.
    pub container_id: String,
    /// Allocate a TTY.
    pub tty: bool,
    /// Stream stdin.
    pub stdin: bool,
    /// Stream stdout.
    pub stdout: bool,
    /// Stream stderr.
    pub stderr: bool,
}
