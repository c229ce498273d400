//! The deployment's shape: any pod serves any request, and a Redis Cluster.

mod cluster;
mod multi_pod;
