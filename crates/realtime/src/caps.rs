//! Caps on the sockets this pod holds at once, per user (`SOCKETS_PER_USER`) and per client
//! address (`SOCKETS_PER_ADDRESS`), so one client cannot hold every socket a pod can carry.
//! Per pod: a socket lives on one pod, and its count ends with it. A socket's place is a
//! [`Ticket`] kept in its extensions; the place is given back when the socket (and with it
//! the ticket) is dropped, whatever ended it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use uuid::Uuid;

/// The client address the HTTP layer saw for a Socket.IO request (an IPv6 client by its
/// /64), put in the request's extensions before the handshake runs.
#[derive(Debug, Clone)]
pub struct ClientAddress(pub String);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    User(Uuid),
    Address(String),
}

/// Which cap a handshake hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    User,
    Address,
}

/// The counts and their caps (0: no cap).
#[derive(Debug, Default)]
pub(crate) struct SocketCaps {
    per_user: usize,
    per_address: usize,
    counts: Arc<Mutex<HashMap<Key, usize>>>,
}

impl SocketCaps {
    pub(crate) fn new(per_user: u32, per_address: u32) -> Self {
        Self {
            per_user: usize::try_from(per_user).unwrap_or(usize::MAX),
            per_address: usize::try_from(per_address).unwrap_or(usize::MAX),
            counts: Arc::default(),
        }
    }

    /// A place for one more socket of `user` from `address`, or which cap is full.
    pub(crate) fn take(&self, user: Uuid, address: Option<&str>) -> Result<Ticket, Full> {
        let mut keys = vec![(Key::User(user), self.per_user, Full::User)];
        if let Some(address) = address {
            keys.push((
                Key::Address(address.to_owned()),
                self.per_address,
                Full::Address,
            ));
        }
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, cap, full) in &keys {
            if *cap > 0 && counts.get(key).copied().unwrap_or(0) >= *cap {
                metrics::counter!("realtime_sockets_capped_total", "cap" => match full {
                    Full::User => "user",
                    Full::Address => "address",
                })
                .increment(1);
                return Err(*full);
            }
        }
        let keys: Vec<Key> = keys.into_iter().map(|(key, _, _)| key).collect();
        for key in &keys {
            *counts.entry(key.clone()).or_insert(0) += 1;
        }
        Ok(Ticket(Arc::new(Held {
            counts: self.counts.clone(),
            keys,
        })))
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum()
    }
}

/// One socket's place; the last clone gives it back (the `Arc` is only ever dropped).
#[derive(Debug, Clone)]
pub(crate) struct Ticket(#[allow(dead_code)] Arc<Held>);

#[derive(Debug)]
struct Held {
    counts: Arc<Mutex<HashMap<Key, usize>>>,
    keys: Vec<Key>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for key in &self.keys {
            if let Some(n) = counts.get_mut(key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_hold_per_user_and_per_address_and_places_come_back() {
        let caps = SocketCaps::new(2, 3);
        let (ann, bob) = (Uuid::new_v4(), Uuid::new_v4());
        let a1 = caps.take(ann, Some("10.0.0.1")).expect("first");
        let a2 = caps.take(ann, Some("10.0.0.1")).expect("second");
        assert_eq!(caps.take(ann, Some("10.0.0.2")).err(), Some(Full::User));
        let b1 = caps.take(bob, Some("10.0.0.1")).expect("bob");
        assert_eq!(caps.take(bob, Some("10.0.0.1")).err(), Some(Full::Address));
        assert!(caps.take(bob, Some("10.0.0.9")).is_ok(), "another address");
        drop(a1);
        let again = a2.clone();
        drop(a2);
        assert!(
            caps.take(ann, Some("10.0.0.1")).is_ok(),
            "a place came back"
        );
        drop((again, b1));
        assert_eq!(caps.held(), 0);
        let open = SocketCaps::new(0, 0);
        let many: Vec<Ticket> = (0..100)
            .map(|_| open.take(ann, None).expect("no cap"))
            .collect();
        assert_eq!(many.len(), 100);
    }
}
