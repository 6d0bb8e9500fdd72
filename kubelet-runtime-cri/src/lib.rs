//! kubelet-runtime-cri (placeholder until its issue lands).
