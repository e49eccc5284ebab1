//! The operations one input is made of, one module a group: each chooses its arguments
//! from the input, makes the call (or changes the world around the queues), and checks the
//! result against the model.

mod aio;
mod commit;
mod ctl;
mod get_events;
mod queue;
mod sources;
mod timer;
mod wait;
