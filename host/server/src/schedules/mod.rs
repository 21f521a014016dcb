//! Schedules over the API (`/v1/schedules`: add, list, show, pause,
//! resume, remove, trigger) and the watcher that starts their runs.

pub(crate) mod routes;
mod watch;

pub(crate) use watch::watch;
