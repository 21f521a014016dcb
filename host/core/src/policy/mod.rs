//! What a workflow may do on the host: the exec safety policy
//! ([`exec`]), the interfaces and capabilities a plugin may import
//! ([`capabilities`]) and secrets — references, their transport and
//! masking ([`secrets`]).

pub mod capabilities;
pub mod exec;
pub mod http;
pub mod secrets;
