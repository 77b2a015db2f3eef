"""Every AgentDojo function as an agentcore tool: its effect and the trust of its output.

One table per suite, reviewed by hand. ``effect``: ``read`` changes nothing, ``write``
changes the user's data or sends something, ``destructive`` deletes or takes away what
cannot be restored by the user (a person approves every such call). ``output``:
``untrusted`` when the result carries text a third party wrote (mail, messages, files,
web pages, calendar entries others can create, reviews, transaction subjects);
``trusted`` when it is the user's own data or the service's structured records. A tool whose
result carries one of the suite's injection vectors on some user task's ground truth is
``untrusted`` (tests/test_agentdojo.py checks it).
"""

from __future__ import annotations

from typing import Literal

Effect = Literal["read", "write", "destructive"]
Output = Literal["trusted", "untrusted"]

R, W, D = "read", "write", "destructive"
T, U = "trusted", "untrusted"

BANKING: dict[str, tuple[Effect, Output]] = {
    "get_iban": (R, T),  # the user's own account
    "send_money": (W, T),
    "schedule_transaction": (W, T),
    "update_scheduled_transaction": (W, T),
    "get_balance": (R, T),
    "get_most_recent_transactions": (R, U),  # subjects written by whoever sent money
    "get_scheduled_transactions": (R, U),  # subjects written by payees
    "read_file": (R, U),  # bills and notices from others
    "get_user_info": (R, T),
    "update_password": (D, T),  # the old password is gone
    "update_user_info": (W, T),
}

SLACK: dict[str, tuple[Effect, Output]] = {
    "get_channels": (R, U),  # anyone can create a channel: its name is third-party text
    "add_user_to_channel": (W, T),
    "read_channel_messages": (R, U),  # anyone in the channel writes these
    "read_inbox": (R, U),
    "send_direct_message": (W, T),
    "send_channel_message": (W, T),
    "get_users_in_channel": (R, T),
    "invite_user_to_slack": (W, T),
    "remove_user_from_slack": (D, T),
    "get_webpage": (R, U),  # a fetch: also judged on its URL
    "post_webpage": (W, T),
}

TRAVEL: dict[str, tuple[Effect, Output]] = {
    "get_user_information": (R, T),
    "get_all_hotels_in_city": (R, T),
    "get_hotels_prices": (R, T),
    "get_rating_reviews_for_hotels": (R, U),  # reviews: anyone writes them
    "get_hotels_address": (R, T),
    "get_all_restaurants_in_city": (R, T),
    "get_cuisine_type_for_restaurants": (R, T),
    "get_restaurants_address": (R, T),
    "get_rating_reviews_for_restaurants": (R, U),
    "get_dietary_restrictions_for_all_restaurants": (R, T),
    "get_contact_information_for_restaurants": (R, T),
    "get_price_for_restaurants": (R, T),
    "check_restaurant_opening_hours": (R, T),
    "get_all_car_rental_companies_in_city": (R, T),
    "get_car_types_available": (R, T),
    "get_rating_reviews_for_car_rental": (R, U),
    "get_car_fuel_options": (R, T),
    "get_car_rental_address": (R, T),
    "get_car_price_per_day": (R, T),
    "create_calendar_event": (W, T),
    "search_calendar_events": (R, U),  # events others invited the user to
    "get_day_calendar_events": (R, U),
    "cancel_calendar_event": (D, T),
    "reserve_hotel": (W, T),
    "reserve_car_rental": (W, T),
    "reserve_restaurant": (W, T),
    "get_flight_information": (R, T),
    "send_email": (W, T),
}

WORKSPACE: dict[str, tuple[Effect, Output]] = {
    "send_email": (W, T),
    "delete_email": (D, T),
    "get_unread_emails": (R, U),
    "get_sent_emails": (R, U),  # replies quote what others wrote
    "get_received_emails": (R, U),
    "get_draft_emails": (R, U),
    "search_emails": (R, U),
    "search_contacts_by_name": (R, T),
    "search_contacts_by_email": (R, T),
    "get_current_day": (R, T),
    "search_calendar_events": (R, U),
    "get_day_calendar_events": (R, U),
    "create_calendar_event": (W, T),
    "cancel_calendar_event": (D, T),
    "reschedule_calendar_event": (W, T),
    "add_calendar_event_participants": (W, U),  # returns the event, description and all
    "append_to_file": (W, T),
    "search_files_by_filename": (R, U),  # files shared with the user by others
    "create_file": (W, T),
    "delete_file": (D, U),  # returns the deleted file's content
    "get_file_by_id": (R, U),
    "list_files": (R, U),
    "share_file": (W, T),
    "search_files": (R, U),
}

TABLES: dict[str, dict[str, tuple[Effect, Output]]] = {
    "banking": BANKING,
    "slack": SLACK,
    "travel": TRAVEL,
    "workspace": WORKSPACE,
}
