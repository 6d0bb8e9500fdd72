//! kubelet-cm (placeholder until its issue lands).
