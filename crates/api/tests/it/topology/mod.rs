//! The deployment's shape: any pod serves any request, a Redis Cluster, and a Redis
//! watched by Sentinel.

mod cluster;
mod multi_pod;
mod sentinel;
