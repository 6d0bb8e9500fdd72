//! kubelet-sources (placeholder until its issue lands).
